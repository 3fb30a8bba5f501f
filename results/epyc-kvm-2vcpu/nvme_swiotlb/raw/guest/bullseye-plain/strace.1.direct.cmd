strace -c -w -o /out/strace.1.direct.txt dd if=/dev/nvme0n1 of=/dev/null bs=1M count=512 iflag=direct
