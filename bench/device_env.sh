# Source on the GPU machine (no pip, no network): installs the carried wheels and makes kernelsearch importable
# with its folder layout (agent/ -> kernelsearch.agent, ...) without a build step. The device's copy of the tree
# is disposable, so the links are made inside it.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
for d in agent prompts search sandbox generators families judge store; do ln -sfn "../$d" "kernelsearch/$d"; done
export PYTHONPATH=/tmp/site:$PWD
export PYTHONUNBUFFERED=1
