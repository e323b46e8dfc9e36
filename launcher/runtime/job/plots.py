"""The run's pictures: a loss-and-throughput plot (PNG) next to the TensorBoard logs, and the loss
curve as one line of text for a terminal or a pod's log."""

from __future__ import annotations

from pathlib import Path

from launcher.core.job.goodput import StepPoint

BARS = "▁▂▃▄▅▆▇█"


def loss_sparkline(losses: list[float], width: int = 40) -> str:
    """The loss curve in `width` characters (each the mean of its share of the steps)."""
    if not losses:
        return ""
    chunk = max(1, -(-len(losses) // width))
    means = [sum(c) / len(c) for c in (losses[i : i + chunk] for i in range(0, len(losses), chunk))]
    low, high = min(means), max(means)
    span = (high - low) or 1.0
    bars = "".join(BARS[min(len(BARS) - 1, int((m - low) / span * len(BARS)))] for m in means)
    return f"{means[0]:.3f} {bars} {means[-1]:.3f}"


def write_plot(
    points: list[StepPoint], path: Path, evals: list[tuple[int, float]] | None = None
) -> Path:
    """Loss (and the held-out loss, where there were evals) and tokens/s/device against the
    step, one PNG."""
    import matplotlib

    matplotlib.use("Agg")  # no display in a pod or a CI run
    import matplotlib.pyplot as plt

    steps = [p.step + 1 for p in points]
    fig, loss_axis = plt.subplots(figsize=(8, 4.5), dpi=100)
    loss_axis.plot(steps, [p.loss for p in points], color="tab:blue", label="train loss")
    if evals:  # after step s: drawn at s + 1, where the steps are counted from 1
        loss_axis.plot(
            [s + 1 for s, _ in evals],
            [loss for _, loss in evals],
            color="tab:green",
            marker="o",
            label="eval loss",
        )
        loss_axis.legend(loc="upper right")
    loss_axis.set_xlabel("step")
    loss_axis.set_ylabel("loss", color="tab:blue")
    speed_axis = loss_axis.twinx()
    speed_axis.plot(steps, [p.tokens_per_device for p in points], color="tab:orange", alpha=0.6)
    speed_axis.set_ylabel("tokens/s/device", color="tab:orange")
    fig.suptitle("training: loss and throughput")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    plt.close(fig)
    return path
