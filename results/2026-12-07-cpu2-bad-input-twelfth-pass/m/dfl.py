import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)  # the tool's background launch left SIGINT ignored; undo it for the children
os.execv(sys.argv[1], sys.argv[1:])
