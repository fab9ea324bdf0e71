"""tessel's device-side helpers for the `trainium` backend (docs/trainium.md)."""
