"""Models in and out of MaxText on the cluster: the Hugging Face import and export, the families'
tables, the hub, the model card, generation, and where a conversion runs."""
