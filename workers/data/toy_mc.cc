#include "workers/data/toy_mc.h"
