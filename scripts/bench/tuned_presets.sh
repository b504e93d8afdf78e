# The three tuned configurations fast, balanced and quality (docs/FRONTIER.md), as frontier configuration texts, for
# the scripts that measure them again (int8_presets.sh, frontier_precision.sh): sourced.
fast=target:num_iter=3:steps=1:sampler=distilled:temperature=0.85
balanced=target:num_iter=3:steps=10:sampler=ddim:eta=1:temperature=0.9
quality=target:num_iter=4:steps=25:sampler=ddim:eta=1:temperature=0.9
