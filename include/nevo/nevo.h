/* nevo: the umbrella header. */
#ifndef NEVO_H
#define NEVO_H

#include "nevo/algo.h"
#include "nevo/config.h"
#include "nevo/env.h"
#include "nevo/eval.h"
#include "nevo/files.h"
#include "nevo/io.h"
#include "nevo/noise.h"
#include "nevo/novelty.h"
#include "nevo/policy.h"
#include "nevo/rng.h"
#include "nevo/status.h"
#include "nevo/threads.h"
#include "nevo/train.h"

#endif
