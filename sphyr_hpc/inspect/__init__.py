"""SPhyR as an Inspect AI task: ``inspect eval sphyr_hpc/sphyr --model M -T dataset=D.jsonl``.

:mod:`._registry` is what Inspect loads to find the task by that name (setup.cfg's entry point);
:mod:`.task` builds the samples (SPhyR's prompts, :mod:`sphyr_hpc.core.prompt`) and :mod:`.scorer`
scores each answer with sphyr_hpc, through the yardstick store ``score`` uses (docs/harness.md).
Needs ``inspect-ai`` (``pip install 'sphyr_hpc[inspect]'``); importing this package does not.
"""
