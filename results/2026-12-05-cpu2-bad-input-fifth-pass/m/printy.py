print("HELLO FROM IMPORT")
from odd import Base as Net
