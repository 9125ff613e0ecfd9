"""docker/ checked statically (no Docker engine runs here): services wired to each other, every referenced file
present, ports, addresses, credentials and the torch pin consistent across compose, Dockerfiles and the
cluster-launcher YAML."""

import re
import shlex

import pytest
import sqlalchemy
import typer.main
import yaml

from search.cli import app
from tests.search.conftest import ROOT

DOCKER = ROOT / "docker"
REDIS_PORT = 6379  # Ray's default head port, and Redis's


def _load(name: str) -> dict:
    return yaml.safe_load((DOCKER / name).read_text())


@pytest.fixture(scope="module")
def compose() -> dict:
    return _load("compose.yaml")


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


def _option(command: list[str], name: str) -> str | None:
    """The value of `--name V` or `--name=V` in an argv list."""
    for i, arg in enumerate(command):
        if arg == name:
            return command[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _head_port(services) -> int:
    return int(_option(services["ray-head"]["command"], "--port"))


def test_compose_has_the_stack(services):
    assert {"postgres", "ray-head", "ray-worker", "dashboard", "driver"} <= set(services)
    assert services["ray-worker"]["deploy"]["replicas"] >= 1


@pytest.mark.parametrize("name", ["compose.yaml", "compose.gpu.yaml"])
def test_every_build_context_dockerfile_and_copied_path_exists(name):
    builds = [s["build"] for s in _load(name)["services"].values() if "build" in s]
    assert builds
    for build in builds:
        context = (DOCKER / build["context"]).resolve()
        assert context == ROOT  # the Dockerfiles COPY paths relative to the repository root
        dockerfile = context / build["dockerfile"]
        assert dockerfile.is_file(), dockerfile
        for line in dockerfile.read_text().splitlines():
            if line.startswith("COPY "):
                for source in line.split()[1:-1]:
                    assert (context / source).exists(), f"{dockerfile.name}: COPY {source} is missing"


def test_dockerfiles_pin_the_same_torch_as_the_package():
    pin = re.search(r'"torch==([\d.]+)"', (ROOT / "pyproject.toml").read_text())[1]
    cpu, cuda = (DOCKER / "Dockerfile.cpu").read_text(), (DOCKER / "Dockerfile.cuda").read_text()
    assert f"torch=={pin} --index-url https://download.pytorch.org/whl/cpu" in cpu
    assert f"torch=={pin} --index-url" in cuda and "whl/cpu" not in cuda
    assert re.search(r"^FROM (nvidia/cuda|pytorch/pytorch):", cuda, re.M)
    # the same Python on every node: pickled values and the stdlib corpus depend on it
    assert re.search(r"^FROM python:3\.11-", cpu, re.M) and "python3.11 -m venv" in cuda


def test_ray_head_port_avoids_redis_and_every_address_points_at_it(services):
    port = _head_port(services)
    assert port != REDIS_PORT
    assert f"ray-head:{port}" == _option(services["ray-worker"]["command"], "--address")
    assert f"ray-head:{port}" == _option(services["driver"]["command"], "--address")
    published = [p for s in services.values() for p in s.get("ports", [])]
    assert not [p for p in published if str(p).split(":")[0] == str(REDIS_PORT)]


def test_storage_urls_match_the_postgres_service(services):
    env = services["postgres"]["environment"]
    for name in ("driver", "dashboard"):
        url = sqlalchemy.engine.make_url(_option(services[name]["command"], "--storage"))
        assert url.drivername == "postgresql+psycopg" and url.host == "postgres" and url.port == 5432
        assert (url.username, url.password, url.database) == (env["POSTGRES_USER"], env["POSTGRES_PASSWORD"], env["POSTGRES_DB"])
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])


def test_depends_on_names_existing_services(services):
    for name, service in services.items():
        for dep in service.get("depends_on", []):
            assert dep in services and dep != name


def test_ray_nodes_and_driver_share_the_auth_token(services):
    for name in ("ray-head", "ray-worker", "driver"):
        env = services[name]["environment"]
        assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN"].startswith("${RAY_AUTH_TOKEN:?")


def test_dashboard_listens_on_its_published_port(services):
    command = services["dashboard"]["command"]
    assert _option(command, "--host") == "0.0.0.0"
    assert f"{_option(command, '--port')}:{_option(command, '--port')}" in services["dashboard"]["ports"]


@pytest.mark.parametrize("service", ["driver", "dashboard"])
def test_prism_search_commands_exist_with_their_options(services, service):
    command = services[service]["command"]
    assert command[0] == "prism-search"
    cli = typer.main.get_command(app)
    assert command[1] in cli.commands, f"docker compose runs `prism-search {command[1]}`, which the CLI no longer has"
    known = {opt for param in cli.commands[command[1]].params for opt in param.opts}
    assert {arg.split("=")[0] for arg in command[2:] if arg.startswith("--")} <= known
    if command[1] == "run":
        assert (ROOT / command[2]).is_file()  # the study file baked into the image


def test_gpu_override_gives_one_worker_all_gpus():
    worker = _load("compose.gpu.yaml")["services"]["ray-worker"]
    assert worker["deploy"]["replicas"] == 1  # two containers would both claim every GPU
    assert worker["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]


def test_cluster_launcher_yaml_is_consistent():
    cfg = _load("ray-cluster-aws.yaml")
    assert cfg["head_node_type"] in cfg["available_node_types"]
    assert cfg["available_node_types"][cfg["head_node_type"]]["resources"] == {"CPU": 0}
    head = shlex.split(cfg["head_start_ray_commands"][-1].split(";")[-1])
    worker = shlex.split(cfg["worker_start_ray_commands"][-1].split(";")[-1])
    port = _option(head, "--port")
    assert int(port) != REDIS_PORT and _option(worker, "--address") == f"$RAY_HEAD_IP:{port}"
    assert cfg["docker"]["worker_image"].endswith(":cuda") and cfg["docker"]["head_image"].endswith(":cpu")
    assert "--gpus all" in cfg["docker"]["worker_run_options"]
