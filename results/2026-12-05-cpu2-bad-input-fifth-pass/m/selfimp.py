import selfimp
from odd import Base as Net
