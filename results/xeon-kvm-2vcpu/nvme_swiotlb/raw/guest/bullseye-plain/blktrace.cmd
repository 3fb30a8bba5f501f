blktrace -d /dev/nvme0n1 -o nvme -D /tmp/pcb
