"""Files in and out: SPhyR result records, JSON Lines results, field output."""
