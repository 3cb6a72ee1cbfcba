#include "workers/physics/validation.h"
