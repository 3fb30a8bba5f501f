python3 /job/alternate.py --mib 256 --rounds 10 /dev/nvme0n1 /dev/vda
