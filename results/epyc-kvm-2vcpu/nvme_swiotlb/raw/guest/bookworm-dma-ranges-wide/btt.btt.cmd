btt -i /tmp/pcb/blk.bin -l /out/btt.d2c -q /out/btt.q2c
