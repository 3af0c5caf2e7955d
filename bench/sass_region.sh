#!/bin/bash
# Registers and local-memory traffic of a kernel's setmaxnreg regions, from
# its SASS (no GPU needed). Needs cuobjdump: in /usr/local/cuda/bin where
# installed, else from the PyPI wheel `nvidia-cuda-cuobjdump`:
#   pip download --no-deps nvidia-cuda-cuobjdump -d /tmp/cuobj &&
#   python3 -m zipfile -e /tmp/cuobj/*.whl /tmp/cuobj/x &&
#   export PATH=/tmp/cuobj/x/nvidia/cu13/bin:$PATH   (chmod +x the binary)
#
# usage: bench/sass_region.sh OBJECT.o MANGLED_KERNEL_NAME
#   e.g. bench/sass_region.sh build/obj/src/device/ops/moe.o \
#          _Z10moe_kernelILi0ELi2ELi1EEv13loom_dev_comm15loom_moe_params13loom_moe_call8moe_maps
# For every USETMAXREG instruction: its line, and for the code from it to
# the next one (in address order, which is how ptxas lays the roles out,
# not necessarily control flow) the highest register named and the number
# of local loads/stores (LDL/STL: spills and stack). A consumer region that
# stops near R165 under setmaxnreg 232 is not getting its registers
# (docs/moe.md, session 11).
set -e
obj=$1 fn=$2
[ -n "$obj" ] && [ -n "$fn" ] || { sed -n 2,17p "$0"; exit 2; }
sass=$(mktemp)
cuobjdump -sass -fun "$fn" "$obj" > "$sass"
mapfile -t marks < <(grep -n "USETMAXREG" "$sass" | cut -d: -f1)
total=$(wc -l < "$sass")
marks+=("$total")
for ((i = 0; i < ${#marks[@]} - 1; i++)); do
  a=${marks[$i]} b=${marks[$((i + 1))]}
  what=$(sed -n "${a}p" "$sass" | grep -o "USETMAXREG[^;]*")
  maxr=$(sed -n "${a},${b}p" "$sass" | grep -o " R[0-9]\+" | sed 's/ R//' | sort -n | tail -1)
  loc=$(sed -n "${a},${b}p" "$sass" | grep -c "LDL\|STL" || true)
  printf '%-48s lines %6d-%6d  max R%-4s LDL/STL %d\n' "$what" "$a" "$b" "$maxr" "$loc"
done
rm -f "$sass"
