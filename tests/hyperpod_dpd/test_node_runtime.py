"""Node's V8 thread pool fits the machine: fewer background threads than cores on small machines, Node's default
elsewhere, and a user's own setting is kept."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from hyperpod_dpd.node_runtime import NODE_DEFAULT_POOL_SIZE, fit_node_to_machine, pool_size


@pytest.mark.parametrize(("cpus", "expected"), [(1, 1), (2, 1), (3, 2), (4, 3), (5, None), (64, None), (None, None)])
def test_the_pool_leaves_a_core_for_the_main_thread_and_never_exceeds_nodes_default(cpus: int | None,
                                                                                     expected: int | None) -> None:
    # GIVEN a machine with `cpus` cores WHEN the pool is sized THEN one core stays free, up to Node's own default
    assert pool_size(cpus) == expected
    assert expected is None or expected < NODE_DEFAULT_POOL_SIZE


def test_on_two_cores_the_option_is_added_to_the_users_options() -> None:
    # GIVEN a two-core machine whose NODE_OPTIONS already hold another option
    environ = {"NODE_OPTIONS": "--max-old-space-size=8192"}
    # WHEN Node is fitted to it
    added = fit_node_to_machine(environ, cpus=2)
    # THEN the pool option is appended and the user's option kept
    assert added == "--v8-pool-size=1"
    assert environ["NODE_OPTIONS"] == "--max-old-space-size=8192 --v8-pool-size=1"


@pytest.mark.parametrize("environ", [{"NODE_OPTIONS": "--v8-pool-size=8"}, {"NODE_OPTIONS": "--v8-pool-size 8"}])
def test_a_pool_size_the_user_chose_is_kept(environ: dict[str, str]) -> None:
    before = dict(environ)
    # GIVEN a user's own pool size WHEN Node is fitted to a two-core machine THEN nothing changes
    assert fit_node_to_machine(environ, cpus=2) is None
    assert environ == before


def test_a_large_machine_keeps_nodes_default() -> None:
    environ: dict[str, str] = {}
    # GIVEN eight cores WHEN Node is fitted THEN NODE_OPTIONS is not even created
    assert fit_node_to_machine(environ, cpus=8) is None
    assert environ == {}


def test_node_accepts_the_option_in_node_options() -> None:
    # GIVEN the options fitted for two cores (Node refuses most V8 flags in NODE_OPTIONS)
    environ: dict[str, str] = {}
    fit_node_to_machine(environ, cpus=2)
    node = shutil.which("node")
    assert node is not None
    # WHEN Node starts with them THEN it runs rather than refusing the option
    done = subprocess.run([node, "-e", "process.stdout.write('ok')"], env={"PATH": "", **environ},
                          capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "ok", "")
