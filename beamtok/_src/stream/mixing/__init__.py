"""Mixing several datasets by weight: the mixing plan, its one stop and schedule rule, the reading and the seeking mix, mixes of mixes."""
