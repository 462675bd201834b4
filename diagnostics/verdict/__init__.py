"""What happened to a stream: exception fingerprints, silences, what the client saw, and the rule table that classifies where and why a stream broke."""
