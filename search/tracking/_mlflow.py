"""MLflow: one experiment per study holding a parent run (the study) and one child run per trial."""

from __future__ import annotations

import functools
import logging
import os
import time

from search.tracking._base import Tracker, TrialRecord


class MLflowTracker(Tracker):
    name = "mlflow"

    def __init__(self, target: str):
        super().__init__(target)
        self._parents: dict[str, tuple[str, str]] = {}  # study -> (experiment id, parent run id)

    @functools.cached_property
    def _client(self):
        """Made on first use: mlflow is imported only by a run that tracks with it."""
        # a tracking server that is down must not stall the driver for MLflow's default ~4 min of retries
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
        if "://" not in self.target or self.target.startswith("file:"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # a folder was asked for: MLflow 3 refuses by default
        from mlflow.tracking import MlflowClient

        # MLflow logs a warning per retry (dozens of lines for a store it cannot open): ours is the one that counts
        logging.getLogger("mlflow").setLevel(logging.ERROR)
        return MlflowClient(tracking_uri=self.target)

    def _parent(self, study_name: str) -> tuple[str, str]:
        """The study's experiment and parent run, found again on resume by its tag."""
        if study_name not in self._parents:
            exp = self._client.get_experiment_by_name(study_name)
            exp_id = exp.experiment_id if exp else self._client.create_experiment(study_name)
            found = self._client.search_runs([exp_id], filter_string="tags.prism_kind = 'study'", max_results=1)
            if found:
                parent = found[0].info.run_id
            else:
                parent = self._client.create_run(exp_id, run_name=study_name, tags={"prism_kind": "study"}).info.run_id
                self._client.set_terminated(parent)
            self._parents[study_name] = (exp_id, parent)
        return self._parents[study_name]

    def log_trial(self, study_name: str, record: TrialRecord) -> None:
        from mlflow.entities import Metric, Param, RunTag

        exp_id, parent = self._parent(study_name)
        tags = {"mlflow.parentRunId": parent, "prism_kind": "trial", "state": record.state, "role": record.role}
        run = self._client.create_run(exp_id, run_name=record.run_name, tags=tags).info.run_id
        now = int(time.time() * 1000)
        metrics = [Metric("val_loss", v, now, tokens) for tokens, v in record.curve]
        metrics += [Metric(k, v, now, 0) for k, v in record.metrics.items()]
        self._client.log_batch(
            run, metrics=metrics, params=[Param(k, str(v)) for k, v in record.params.items()], tags=[RunTag("schedule", record.schedule)]
        )
        self._client.set_terminated(run, status="FINISHED" if record.state == "COMPLETE" else "KILLED")
