"""What every job shares, whatever the framework: each host's bookkeeping around its training,
joining Ray, the fit under the hang budget, the records in Ray's KV store and their readers, the
outcome, the summary, the cost, the metrics, the history."""
