"""RandomStreams: the seeding every policy family had before they shared it, what ``seed`` reseeds,
the state-dict layouts checkpoints already hold, and save/load round trips that continue identically."""
import copy

import numpy as np
import pytest
import torch

from rlpipe.policy.streams import EVALUATION_STREAM, RandomStreams, learn_seed

CPU = torch.device("cpu")
FAMILIES = {
    "dqn": {"epsilon": True},
    "distributional": {"epsilon": True, "device": CPU},
    "actor_critic": {"epsilon": False, "device": CPU},
}


def draws(streams):
    """A few numbers from every stream ``streams`` has."""
    out = []
    if hasattr(streams, "exploration"):
        out += [streams.exploration.random(3).tolist(), streams.evaluation.random(3).tolist()]
    if hasattr(streams, "collect"):
        out += [torch.rand(3, generator=streams.collect).tolist(), torch.rand(3, generator=streams.learn).tolist()]
    return out


def test_the_streams_are_seeded_as_each_family_seeded_its_own():
    dqn = RandomStreams(5, **FAMILIES["dqn"])
    assert dqn.exploration.random() == np.random.default_rng(5).random()
    spawned = np.random.default_rng(np.random.SeedSequence(5, spawn_key=(EVALUATION_STREAM,)))
    assert dqn.evaluation.random() == spawned.random()
    actor_critic = RandomStreams(5, **FAMILIES["actor_critic"])
    assert actor_critic.collect.initial_seed() == 5
    assert actor_critic.learn.initial_seed() == learn_seed(5) == int(np.random.SeedSequence(5).generate_state(
        1, dtype=np.uint64)[0])
    distributional = RandomStreams(5, **FAMILIES["distributional"])
    # the noisy layers' acting noise comes from the seed (it came from torch's default seed, whatever the seed)
    assert distributional.collect.initial_seed() == 5 != torch.Generator().initial_seed()
    assert distributional.learn.initial_seed() == learn_seed(5)
    other = RandomStreams(6, **FAMILIES["distributional"])
    assert torch.rand(3, generator=other.collect).tolist() != torch.rand(3, generator=distributional.collect).tolist()


def test_a_family_has_only_the_streams_it_asks_for():
    assert not hasattr(RandomStreams(0, **FAMILIES["dqn"]), "learn")
    assert not hasattr(RandomStreams(0, **FAMILIES["actor_critic"]), "exploration")


@pytest.mark.parametrize("family", FAMILIES)
def test_seed_reseeds_the_acting_streams_and_never_learn(family):
    a, b = RandomStreams(0, **FAMILIES[family]), RandomStreams(1, **FAMILIES[family])
    draws(a)
    a.seed(7)
    b.seed(7)
    got, expected = draws(a), draws(b)
    if hasattr(a, "learn"):
        assert got[-1] != expected[-1]  # learn goes on from each one's own seed
        got, expected = got[:-1], expected[:-1]
    assert got == expected


def test_the_state_dict_layouts_are_those_checkpoints_hold():
    dqn = RandomStreams(0, **FAMILIES["dqn"]).state_dict()
    assert dqn == dict(np.random.default_rng(0).bit_generator.state)  # the bit generator's state itself
    assert set(RandomStreams(0, **FAMILIES["distributional"]).state_dict()) == {"eps", "collect", "learn"}
    assert set(RandomStreams(0, **FAMILIES["actor_critic"]).state_dict()) == {"collect", "learn"}


@pytest.mark.parametrize("family", FAMILIES)
def test_save_and_load_continue_identically(family):
    saved = RandomStreams(3, **FAMILIES[family])
    draws(saved)
    state = copy.deepcopy(saved.state_dict())
    restored = RandomStreams(11, **FAMILIES[family])
    restored.load_state_dict(state)
    expected, got = draws(saved), draws(restored)
    if hasattr(saved, "evaluation"):  # not saved: it starts again from the seed, as the evaluator's envs do
        expected, got = expected[:1] + expected[2:], got[:1] + got[2:]
    assert got == expected


def test_a_state_written_before_the_streams_were_shared_loads():
    """The layouts the three families' own classes wrote, built by hand, load into the shared one."""
    exploration = np.random.default_rng(4)
    exploration.random(5)
    collect, learn = torch.Generator().manual_seed(8), torch.Generator().manual_seed(9)
    torch.rand(2, generator=collect)
    old = {"dqn": dict(exploration.bit_generator.state),
           "distributional": {"eps": dict(exploration.bit_generator.state), "collect": collect.get_state(),
                              "learn": learn.get_state()},
           "actor_critic": {"collect": collect.get_state(), "learn": learn.get_state()}}
    for family, state in old.items():
        streams = RandomStreams(0, **FAMILIES[family])
        streams.load_state_dict(copy.deepcopy(state))
        if hasattr(streams, "exploration"):
            assert streams.exploration.random() == copy.deepcopy(exploration).random()
        if hasattr(streams, "collect"):
            assert torch.equal(torch.rand(2, generator=streams.collect),
                               torch.rand(2, generator=torch.Generator().set_state(collect.get_state())))
            assert torch.equal(streams.learn.get_state(), learn.get_state())
