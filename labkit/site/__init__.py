"""The site's build: what mkdocs runs and nothing else does.

``mkdocs_hooks`` (mkdocs.yml ``hooks``): results' artifacts served, the nav's cases and evidence
pages, figures written, data pages split into fragments. ``macros`` (mkdocs-macros,
``modules: [labkit.site.macros]``): the pages' data, read from results. ``evidence``: the
generated evidence pages; ``lesson``: a chapter's reading time and first screen;
``page_marks`` (a Markdown extension): tab sets and folds marked in the element tree; ``lexer``
(a Pygments lexer, entry point ``pcb-step``): a step's output; ``theme/`` (mkdocs.yml
``custom_dir``): the overrides of mkdocs-material. No lab run imports any of it
(tests/test_faults.py), so the fault matrix leaves this folder out of its code hash.
"""
