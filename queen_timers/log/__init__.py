"""The log: frames, segments, push, pop, ack, dead letters, retention."""
