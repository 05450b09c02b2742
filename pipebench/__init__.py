"""pipebench: on these GPUs, for this model, how should I split the work, and what do I gain?

    import pipebench

    plan = pipebench.plan("resnet101", batch=256, gpus=[0, 1])       # profile, solve, simulate
    print(plan.predicted_samples_per_s, plan.balance)                  # balance: layers per stage
    pipe = torch.distributed.pipelining.pipeline(module, (x,), split_spec=plan.split_spec())

`profile` measures a model, `plan` cuts it into balanced stages with the exact solver and predicts the
step, `advise` predicts every strategy from one profile and recommends the fastest that fits, `run` measures
them side by side and `train` trains with the answer, to a checkpoint the model loads; a `Plan` saves and loads as versioned JSON and is what every strategy's workers run. The command
line (`pipebench models | devices | plan | advise | run | train | report`) builds the same values (a
`Request`, a run's `RunOptions`, a training's `TrainOptions`) and takes the same paths.
"""
from pipebench.api import advise, plan, plan_devices, profile, run, train
from pipebench.base.errors import UserError
from pipebench.partition.planning.plan import Plan, StagePlan
from pipebench.partition.planning.plan_choice import make_plan
from pipebench.partition.profiling.profile_record import LayerProfile, Profile, load_profiles, save_profiles
from pipebench.partition.planning.solver import InfeasibleError, solve
from pipebench.request import Request
from pipebench.base.training import Training
from pipebench.base.version import __version__

__all__ = [
    "plan", "profile", "advise", "run", "train", "plan_devices", "Request", "Training", "Plan", "StagePlan", "make_plan", "Profile", "LayerProfile",
    "load_profiles", "save_profiles", "solve", "InfeasibleError", "UserError",
]
