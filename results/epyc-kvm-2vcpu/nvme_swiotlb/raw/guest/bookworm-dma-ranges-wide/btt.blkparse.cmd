blkparse -i nvme -D /tmp/pcb -d /tmp/pcb/blk.bin -O
