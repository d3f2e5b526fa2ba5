"""SPhyR as lm-evaluation-harness tasks: ``lm_eval --include_path sphyr_hpc/lm_eval --tasks sphyr_full_easy``.

One task per subject (``sphyr_<subject>.yaml``, made from ``_sphyr_template.yaml``) and the groups
``sphyr_easy``, ``sphyr_hard`` and ``sphyr``; :mod:`.utils` builds each document's prompt and
scores each answer with sphyr_hpc (docs/harness.md, "lm-evaluation-harness").  Importing this
package, or :mod:`.utils`, needs no lm-eval.
"""
