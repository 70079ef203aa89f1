#!/usr/bin/env bash
# Turns controller-gen's ClusterRole into the Helm chart's template (one source of truth).
set -euo pipefail
sed -e 's/^  name: modelship-manager$/  name: {{ include "modelship.fullname" . }}-manager/' "$1"
