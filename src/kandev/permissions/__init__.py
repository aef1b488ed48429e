"""Agent permission requests (CONTRACT §11): the profile's policy, the durable request, and
the decision (one claim statement, exactly one winner)."""
