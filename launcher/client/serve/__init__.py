"""Serving from the workstation: will a model fit (serve-fit), a release's serving status, the
model a release serves, Saxml's HTTP API."""
