// Everything an embedding program needs: configs, models, data, optimizers, the engine, the
// trainer and checkpoints. Include the individual headers instead to keep builds lean.
#pragma once

#include "frugal/config/config.h"
#include "frugal/config/load.h"
#include "frugal/data/batch.h"
#include "frugal/data/dataset.h"
#include "frugal/data/loader.h"
#include "frugal/engine/engine.h"
#include "frugal/engine/state.h"
#include "frugal/io/checkpoint.h"
#include "frugal/models/gpt.h"
#include "frugal/models/model.h"
#include "frugal/models/registry.h"
#include "frugal/models/unit.h"
#include "frugal/optim/optimizer.h"
#include "frugal/optim/schedule.h"
#include "frugal/strategy/checkpointing.h"
#include "frugal/strategy/recompute.h"
#include "frugal/train/trainer.h"
#include "frugal/util/error.h"
#include "frugal/util/version.h"
