"""`streamtap probe`'s I/O half: a proxy and fake provider with an ending armed, the user's
client run against them, and the records of its requests read back."""
