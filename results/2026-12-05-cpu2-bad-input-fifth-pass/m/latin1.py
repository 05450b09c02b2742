# -*- coding: latin-1 -*-
NAME = "été"
from odd import Base as Net
