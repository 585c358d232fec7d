#!/usr/bin/env python3
# Waits argv[1] seconds, then becomes the program in argv[2:] (exec: same PID, no shell). Tests use it to give
# a real engine a slow start, so that what loch does for a client during a cold load can be seen.
import os, sys, time

time.sleep(float(sys.argv[1]))
os.execv(sys.argv[2], sys.argv[2:])
