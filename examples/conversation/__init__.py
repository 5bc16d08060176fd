"""A multi-turn procurement conversation: retrieval in turn 1, a wrong answer in turn 3 from history."""
