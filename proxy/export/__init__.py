"""Sending trace records elsewhere: OpenTelemetry spans over OTLP, live and as a backfill."""
