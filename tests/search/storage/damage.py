"""Damage a stored study the way a hand-edited database or a stray script does: one SQL update of one value.

Each kind names the SQL (`{study}`: the damaged study's id, `{trial}`: its trial 0, the paired baseline, which
has params, values, intermediate values and attrs of both kinds) and what the readers must say: the words of the
study's one "unreadable" line, or None where the value is readable and the study still reads (a trial attr of
another type than its writer stores is left out with a warning). PostgreSQL's column types refuse some kinds
when they are written; SQLite stores anything anywhere.
"""

from dataclasses import dataclass

import sqlalchemy

from search.storage import open_storage
from tests.search.dashboard.conftest import quickstart
from tests.search.synthetic import synthetic_study

INTACT = "tiny"


@dataclass(frozen=True)
class Damage:
    sql: str
    says: str | None  # the words of the study's unreadable line; None: the study still reads
    # on PostgreSQL: "same" damage; "refuses": the column's type refuses the value when it is written; "valid": the
    # SQL stores a valid value there (the bits of X'80FF' as text, 'yesterday' as a date), so it is no damage
    postgresql: str = "same"


CONFIG = "study_user_attributes SET value_json = {value} WHERE study_id = {{study}} AND key = 'prism.config'"
TRIAL_USER = "trial_user_attributes SET value_json = {value} WHERE trial_id = {{trial}} AND key = 'schedule'"
NOT_UTF8 = "CAST(X'80FF' AS TEXT)"

DAMAGE: dict[str, Damage] = {
    "state-bogus": Damage(
        "UPDATE trials SET state = 'BOGUS' WHERE trial_id = {trial}", "trial 0's state holds 'BOGUS', not a trial state", "refuses"
    ),
    "direction-sideways": Damage(
        "UPDATE study_directions SET direction = 'SIDEWAYS' WHERE study_id = {study}",
        "direction of objective 0 holds 'SIDEWAYS'",
        "refuses",
    ),
    "no-direction": Damage("DELETE FROM study_directions WHERE study_id = {study}", "directions are stored for objectives []"),
    "value-text": Damage(
        "UPDATE trial_values SET value = 'abc' WHERE trial_id = {trial}", "trial 0's value of objective 0 holds 'abc'", "refuses"
    ),
    "value-null": Damage("UPDATE trial_values SET value = NULL WHERE trial_id = {trial}", "trial 0's value of objective 0 is NULL"),
    "value-type-bogus": Damage(
        "UPDATE trial_values SET value_type = 'BOGUS' WHERE trial_id = {trial}",
        "trial 0's value type of objective 0 holds 'BOGUS'",
        "refuses",
    ),
    "value-objective-gap": Damage(
        "UPDATE trial_values SET objective = 3 WHERE trial_id = {trial}", "trial 0's values are stored for objectives [3]"
    ),
    "intermediate-text": Damage(
        "UPDATE trial_intermediate_values SET intermediate_value = 'abc' WHERE trial_id = {trial}",
        "trial 0's intermediate value at step",
        "refuses",
    ),
    "intermediate-null": Damage(
        "UPDATE trial_intermediate_values SET intermediate_value = NULL WHERE trial_id = {trial}", "trial 0's intermediate value at step"
    ),
    "intermediate-type-bogus": Damage(
        "UPDATE trial_intermediate_values SET intermediate_value_type = 'BOGUS' WHERE trial_id = {trial}",
        "trial 0's intermediate value type at step",
        "refuses",
    ),
    "step-text": Damage(
        "UPDATE trial_intermediate_values SET step = 'x' WHERE trial_intermediate_value_id = "
        "(SELECT min(trial_intermediate_value_id) FROM trial_intermediate_values WHERE trial_id = {trial})",
        "trial 0's intermediate step holds 'x'",
        "refuses",
    ),
    "config-list": Damage("UPDATE " + CONFIG.format(value="'[1, 2]'"), "user attr 'prism.config' holds list"),
    "config-raw-not-json": Damage(
        "UPDATE " + CONFIG.format(value="'\"{{not json\"'"), "stored config of study 'config-raw-not-json': not valid JSON"
    ),
    "config-number": Damage("UPDATE " + CONFIG.format(value="'5'"), "user attr 'prism.config' holds int"),
    "config-json-list-text": Damage(
        "UPDATE " + CONFIG.format(value="'\"[1]\"'"), "stored config of study 'config-json-list-text': holds a JSON list, not a table"
    ),
    "config-not-json": Damage("UPDATE " + CONFIG.format(value="'{{not json'"), "user attr 'prism.config' holds '{not json', not JSON"),
    "config-null": Damage("UPDATE " + CONFIG.format(value="NULL"), "user attr 'prism.config' is NULL"),
    "study-user-attr-null": Damage(
        "UPDATE study_user_attributes SET value_json = NULL WHERE study_id = {study} AND key = 'prism.corpus_fingerprint'",
        "user attr 'prism.corpus_fingerprint' is NULL",
    ),
    "study-user-attr-not-json": Damage(
        "UPDATE study_user_attributes SET value_json = '{{x' WHERE study_id = {study} AND key = 'prism.corpus_fingerprint'",
        "user attr 'prism.corpus_fingerprint' holds '{x', not JSON",
    ),
    "study-user-attr-key-null": Damage(
        "UPDATE study_user_attributes SET key = NULL WHERE study_id = {study} AND key = 'prism.corpus_fingerprint'", "user attr key is NULL"
    ),
    "study-system-attr-null": Damage("UPDATE study_system_attributes SET value_json = NULL WHERE study_id = {study}", "system attr"),
    "study-system-attr-not-json": Damage("UPDATE study_system_attributes SET value_json = '[' WHERE study_id = {study}", "system attr"),
    "metric-names-number": Damage("UPDATE study_system_attributes SET value_json = '5' WHERE study_id = {study}", "system attr"),
    "study-name-not-utf8": Damage(f"UPDATE studies SET study_name = {NOT_UTF8} WHERE study_id = {{study}}", "name holds bytes", "valid"),
    "trial-user-attr-null": Damage("UPDATE " + TRIAL_USER.format(value="NULL"), "trial 0's user attr 'schedule' is NULL"),
    "trial-user-attr-not-json": Damage("UPDATE " + TRIAL_USER.format(value="'{{x'"), "trial 0's user attr 'schedule' holds '{x', not JSON"),
    "trial-user-attr-not-utf8": Damage(
        "UPDATE " + TRIAL_USER.format(value=NOT_UTF8), "trial 0's user attr 'schedule' holds bytes", "valid"
    ),
    "trial-user-attr-key-null": Damage(
        "UPDATE trial_user_attributes SET key = NULL WHERE trial_id = {trial} AND key = 'schedule'", "trial 0's user attr key is NULL"
    ),
    "trial-system-attr-null": Damage(
        "UPDATE trial_system_attributes SET value_json = NULL WHERE trial_id = {trial}", "trial 0's system attr"
    ),
    "trial-system-attr-not-json": Damage(
        "UPDATE trial_system_attributes SET value_json = 'nope' WHERE trial_id = {trial}", "trial 0's system attr"
    ),
    "distribution-not-json": Damage(
        "UPDATE trial_params SET distribution_json = '{{bad' WHERE trial_id = {trial}",
        "trial 0's distribution of param 'switch_1' holds '{bad', not an Optuna distribution",
    ),
    "distribution-unknown": Damage(
        'UPDATE trial_params SET distribution_json = \'{{"name": "Nope", "attributes": {{}}}}\' WHERE trial_id = {trial}',
        "not an Optuna distribution",
    ),
    "distribution-null": Damage(
        "UPDATE trial_params SET distribution_json = NULL WHERE trial_id = {trial}", "trial 0's distribution of param 'switch_1' is NULL"
    ),
    "param-zz": Damage(
        "UPDATE trial_params SET param_value = 'zz' WHERE trial_id = {trial}", "holds 'zz', not a value of its distribution", "refuses"
    ),
    "param-null": Damage("UPDATE trial_params SET param_value = NULL WHERE trial_id = {trial}", "is NULL"),
    "param-past-choices": Damage(
        "UPDATE trial_params SET param_value = 7, distribution_json = "
        '\'{{"name": "CategoricalDistribution", "attributes": {{"choices": [1, 2]}}}}\' WHERE trial_id = {trial}',
        "holds 7.0, not a value of its distribution",
    ),
    "param-name-null": Damage("UPDATE trial_params SET param_name = NULL WHERE trial_id = {trial}", "trial 0's param name is NULL"),
    "number-null": Damage("UPDATE trials SET number = NULL WHERE trial_id = {trial}", "number (trial id"),
    "number-text": Damage("UPDATE trials SET number = 'x' WHERE trial_id = {trial}", "number (trial id", "refuses"),
    "start-not-a-date": Damage(
        "UPDATE trials SET datetime_start = 'yesterday' WHERE trial_id = {trial}", "trial 0's start time holds 'yesterday'", "valid"
    ),
    "complete-not-a-date": Damage(
        "UPDATE trials SET datetime_complete = 'soon' WHERE trial_id = {trial}", "trial 0's completion time holds 'soon'", "refuses"
    ),
    # a second direction: the readers go by the stored config's objectives, and read the study
    "extra-direction": Damage("INSERT INTO study_directions (direction, study_id, objective) VALUES ('MAXIMIZE', {study}, 1)", None),
    # valid JSON of another type than its writer stores: the trial is left out with a warning, the study reads
    "schedule-a-number": Damage("UPDATE " + TRIAL_USER.format(value="'5'"), None),
    "seed-text": Damage("UPDATE trial_user_attributes SET value_json = '\"x\"' WHERE trial_id = {trial} AND key = 'seed'", None),
}


def build(url: str) -> dict[str, str]:
    """The intact study INTACT and one study per kind of damage, each named as its kind, in the storage at `url`
    (on PostgreSQL, none of the kinds it stores as valid values); returns each kind the database refused to store,
    with its reason (PostgreSQL's types)."""
    storage = open_storage(url)
    kinds = [k for k, d in DAMAGE.items() if not (url.startswith("postgresql") and d.postgresql == "valid")]
    synthetic_study(quickstart(INTACT), storage, 6, failed=0)
    for kind in kinds:
        synthetic_study(quickstart(kind), storage, 3, failed=0)
    refused = {}
    for kind in kinds:
        damage = DAMAGE[kind]
        with storage.engine.connect() as conn:
            study = conn.execute(sqlalchemy.text("SELECT study_id FROM studies WHERE study_name = :n"), {"n": kind}).scalar_one()
            trial = conn.execute(
                sqlalchemy.text("SELECT trial_id FROM trials WHERE study_id = :s AND number = 0"), {"s": study}
            ).scalar_one()
        try:
            with storage.engine.begin() as conn:
                changed = conn.execute(sqlalchemy.text(damage.sql.format(study=study, trial=trial))).rowcount
        except sqlalchemy.exc.DBAPIError as e:
            refused[kind] = str(e.orig).splitlines()[0]
            continue
        assert changed >= 1, f"{kind}: the update changed nothing"
    storage.engine.dispose()
    return refused
