"""Function-style middleware (factories returning ``fn(ctx)``)."""
from rlpipe.framework.middleware.functional.data_processor import (
    data_pusher,
    nstep_reward_enhancer,
    offpolicy_data_fetcher,
)
from rlpipe.framework.middleware.functional.evaluator import (
    evaluate_episodes,
    evaluation_actions,
    interaction_evaluator,
)
from rlpipe.framework.middleware.functional.explorer import (
    eps_greedy_handler,
    epsilon_ladder,
    epsilon_schedule,
    fixed_eps,
)
from rlpipe.framework.middleware.functional.her import her_data_enhancer
from rlpipe.framework.middleware.functional.logger import online_logger, progress_bar
from rlpipe.framework.middleware.functional.lr_scheduler import lr_scheduler, scheduled_learning_rates
from rlpipe.framework.middleware.functional.reward_estimator import reward_estimator
from rlpipe.framework.middleware.functional.reward_model_trainer import reward_model_trainer
from rlpipe.framework.middleware.functional.termination_checker import termination_checker
from rlpipe.framework.middleware.functional.trainer import TrainingDivergedError, multistep_trainer, trainer

__all__ = [
    "TrainingDivergedError",
    "data_pusher",
    "eps_greedy_handler",
    "epsilon_ladder",
    "epsilon_schedule",
    "evaluate_episodes",
    "evaluation_actions",
    "fixed_eps",
    "her_data_enhancer",
    "interaction_evaluator",
    "lr_scheduler",
    "multistep_trainer",
    "nstep_reward_enhancer",
    "offpolicy_data_fetcher",
    "online_logger",
    "progress_bar",
    "reward_estimator",
    "reward_model_trainer",
    "scheduled_learning_rates",
    "termination_checker",
    "trainer",
]
