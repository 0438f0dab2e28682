"""Everything that runs inside the sandbox, where the submission runs: copied there whole, as `gradeworker`.

Nothing here is trusted once a submission has run beside it. It imports only the standard library,
torch, safetensors, libseccomp's and Landlock's bindings, and its own modules (tests/kit/test_layout.py
checks this), and the trusted side imports from it only `shared/`: plain libraries both sides run.
"""
