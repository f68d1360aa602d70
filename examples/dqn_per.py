"""DQN with prioritised experience replay on CartPole: the pipeline of ``examples/dqn.py``.

The preset ``cartpole-dqn-per`` sets ``policy.priority``, so the buffer that ``build_parts``
makes samples transitions in proportion to priority^alpha (``PriorityExperienceReplay``) and
corrects the bias with importance weights. The policy's learn output carries each sample's
|TD error| as ``priority``; the learner's fetcher hands it to the buffer it sampled from, for
exactly the transitions it trained on. Nothing else in the pipeline changes.

    python examples/dqn_per.py [key=value ...]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dqn import main as dqn_main  # the sibling example, found through the line above


def main(overrides: list[str]) -> float:
    return dqn_main(overrides, preset="cartpole-dqn-per")


if __name__ == "__main__":
    print(f"last evaluation return: {main(sys.argv[1:]):.1f}")
