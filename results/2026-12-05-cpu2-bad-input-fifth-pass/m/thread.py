import threading, time
threading.Thread(target=time.sleep, args=(600,)).start()
from odd import Base as Net
