// Umbrella header of the dash_attn C++ API.
#pragma once

#include "dash_attn/api.hpp"
#include "dash_attn/error.hpp"
#include "dash_attn/tile_config.hpp"
#include "dash_attn/types.hpp"
