"""How a result looks, in every face of the kit: the score table and failures in a terminal (`render`), where a
terminal line breaks (`breaking`), and the one next step every view ends with (`next_step`).

Here, not in cli/, so that `grader batch`'s feedback files, the watch loop, the notebook and the command line draw a
report with one renderer: it stands on grade/'s reports and nothing above them (docs/architecture.md).
"""
