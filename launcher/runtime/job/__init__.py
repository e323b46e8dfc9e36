"""The driver's side of a job, whatever the framework: joining Ray, the fit under the hang budget,
the records in Ray's KV store, the outcome, the summary, the cost, the metrics, the history."""
