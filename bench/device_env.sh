# Source on the GPU machine (no pip, no network): installs the carried wheels and makes kernelsearch importable
# with its folder layout (agent/ -> kernelsearch.agent, ...) without a build step.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
rm -rf /tmp/pkg && mkdir -p /tmp/pkg/kernelsearch
cp -r kernelsearch/* /tmp/pkg/kernelsearch/
for d in agent prompts search sandbox evaluators store; do ln -s "$PWD/$d" "/tmp/pkg/kernelsearch/$d"; done
export PYTHONPATH=/tmp/site:/tmp/pkg:$PWD
export PYTHONUNBUFFERED=1
