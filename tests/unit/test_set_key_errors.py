"""A mistaken ``--set`` key is one line that quotes the key as the user typed it, whole: an index
out of range says which indices there are, and a key of the other file (``links.0.loss`` given
for the experiment) names the key the user meant."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmptwin.errors import UserError
from rmptwin.model import load_experiment
from rmptwin.model.overrides import make_point

REPO = Path(__file__).resolve().parents[2]
LINE3 = REPO / "experiments" / "line3.yaml"   # topologies/line3.yaml: 2 switch links


def _error(key: str, value: object = 0.1) -> str:
    with pytest.raises(UserError) as e:
        make_point(load_experiment(LINE3), {key: value})
    message = str(e.value)
    assert "\n" not in message
    return message


def test_an_index_out_of_range_quotes_the_whole_key_and_the_valid_range() -> None:
    assert _error("topology.links.40.loss") == ("--set topology.links.40.loss: index 40 is out of range; "
                                                "topology.links has 2 entries, so give an index from 0 to 1")


def test_a_word_for_an_index_says_what_the_indices_are() -> None:
    assert _error("topology.links.first.loss") == (
        "--set topology.links.first.loss: 'first' is not an index into topology.links; "
        "topology.links has 2 entries, so give an index from 0 to 1")


def test_an_index_into_an_empty_list_says_it_is_empty() -> None:
    assert _error("faults.0.at_s", 1.0) == "--set faults.0.at_s: index 0 is out of range; faults is empty"


def test_a_last_index_out_of_range_names_the_range_too() -> None:
    assert _error("topology.links.5", None).endswith("index 5 is out of range; topology.links has 2 entries, "
                                                     "so give an index from 0 to 1")


def test_a_misspelt_topology_field_quotes_the_whole_key() -> None:
    assert _error("topology.links.0.los") == ("--set topology.links.0.los: the topology has no field "
                                              "'topology.links.0.los' (check its spelling)")


def test_a_topology_key_given_for_the_experiment_suggests_its_topology_prefix() -> None:
    assert _error("links.0.loss") == ("--set links.0.loss: the experiment has no field 'links'; it is the "
                                      "topology's: did you mean topology.links.0.loss?")


def test_an_experiment_key_given_under_topology_suggests_it_without_the_prefix() -> None:
    assert _error("topology.protocol.k_r", 2) == ("--set topology.protocol.k_r: the topology has no field "
                                                  "'protocol'; it is the experiment's: did you mean protocol.k_r?")


def test_the_command_line_prints_it_as_one_line_exit_2() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    r = subprocess.run([sys.executable, "-m", "rmptwin.cli.main", "sim", str(LINE3), "--set",
                        "topology.links.40.loss=0.1"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == ["rmptwin: --set topology.links.40.loss: index 40 is out of range; "
                                             "topology.links has 2 entries, so give an index from 0 to 1"]
