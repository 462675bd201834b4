"""What happened to a stream: the state a dialect folds frames into, the vocabularies, exception fingerprints, and the rule table that classifies where and why a stream broke."""
