"""``--weights``: set user class weights and rebuild task lists of Locust user classes."""

from __future__ import annotations

from collections.abc import Callable

from locust import User

from triton_kit.loadtest.options import Weights


def apply_weights(weights: Weights, classes: dict[str, type[User]]) -> None:
    """Set user class weights and rebuild each class's task list from ``weights``."""
    for family, weight in weights.users.items():
        if family not in classes:
            raise ValueError(f"unknown family {family!r} in --weights; known: {sorted(classes)}")
        classes[family].weight = weight
    for (family, task_name), _ in weights.tasks.items():
        if family not in classes or not callable(getattr(classes[family], task_name, None)):
            raise ValueError(f"unknown task {family}.{task_name} in --weights")
    for family, cls in classes.items():
        wanted = {name: w for (fam, name), w in weights.tasks.items() if fam == family}
        if wanted:
            cls.tasks = _task_list(cls, wanted)


def _task_list(cls: type[User], overrides: dict[str, int]) -> list[Callable]:
    """Locust picks uniformly from ``tasks``: a task of weight w appears w times."""
    methods: dict[str, Callable] = {}
    for klass in reversed(cls.__mro__):  # subclasses override inherited tasks
        for name, fn in vars(klass).items():
            if callable(fn) and hasattr(fn, "locust_task_weight"):
                methods[name] = fn
    tasks = []
    for name, fn in methods.items():
        tasks += [fn] * overrides.get(name, fn.locust_task_weight)
    if not tasks:
        raise ValueError(f"--weights leaves {cls.__name__} without any task")
    return tasks
