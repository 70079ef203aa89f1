-- Argo CD health check for serving.modelship.dev/ModelServer (Lua 5.1, as Argo CD runs it).
--
-- Reads status.observedGeneration, status.phase and the kstatus conditions (Ready, Stalled) that
-- the modelship controller writes; see internal/health for the table of conditions per phase.
-- Cases, first match wins:
--   no status, or status.observedGeneration < metadata.generation -> Progressing (spec not acted on yet)
--   condition Stalled=True               -> Degraded    (rolled back, or a spec that cannot run)
--   phase RolledBack                     -> Degraded    (the spec's revision failed; stable serves)
--   phase Degraded                       -> Degraded    (the serving revision has no available replicas)
--   phase Paused                         -> Suspended   (spec.paused; `kubectl modelship resume`)
--   phase AwaitingPromotion              -> Suspended   (`kubectl modelship promote` or abort)
--   phase Healthy and condition Ready=True -> Healthy
--   anything else (Pending, Progressing, Healthy without Ready=True) -> Progressing
local hs = {}

local function condition(conditions, type)
  if conditions == nil then
    return nil
  end
  for _, c in ipairs(conditions) do
    if c.type == type then
      return c
    end
  end
  return nil
end

local function rollout(status, spec)
  local steps = 4
  if spec ~= nil and spec.rollout ~= nil and spec.rollout.steps ~= nil and #spec.rollout.steps > 0 then
    steps = #spec.rollout.steps
  end
  local step = 0
  if status.rollout ~= nil and status.rollout.step ~= nil then
    step = status.rollout.step
  end
  local text = "step " .. tostring(step) .. " of " .. tostring(steps)
  if status.weights ~= nil then
    text = text .. ", candidate weight " .. tostring(status.weights.candidate or 0) .. "%"
  end
  if status.candidate ~= nil and status.candidate.revision ~= nil then
    text = text .. " (revision " .. status.candidate.revision .. ")"
  end
  return text
end

local status = obj.status
local generation = 0
if obj.metadata ~= nil and obj.metadata.generation ~= nil then
  generation = obj.metadata.generation
end

if status == nil or status.observedGeneration == nil or status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the modelship controller to observe generation " .. tostring(generation)
  return hs
end

local stalled = condition(status.conditions, "Stalled")
local ready = condition(status.conditions, "Ready")
local phase = status.phase or ""

if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = "Stalled (" .. (stalled.reason or "") .. "): " .. (stalled.message or "")
  return hs
end
if phase == "RolledBack" then
  hs.status = "Degraded"
  local rejected = status.revision or "?"
  if status.rollout ~= nil and status.rollout.rolledBackRevision ~= nil then
    rejected = status.rollout.rolledBackRevision
  end
  hs.message = "Revision " .. rejected .. " was rolled back; the stable revision serves all traffic"
  return hs
end
if phase == "Degraded" then
  hs.status = "Degraded"
  hs.message = "The serving revision has no available replicas"
  return hs
end
if phase == "Paused" then
  hs.status = "Suspended"
  hs.message = "Rollout paused at " .. rollout(status, obj.spec)
  return hs
end
if phase == "AwaitingPromotion" then
  hs.status = "Suspended"
  hs.message = "Rollout awaiting promotion at " .. rollout(status, obj.spec)
  return hs
end
if phase == "Healthy" and ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = "Revision " .. (status.revision or "?") .. " serves all traffic"
  return hs
end

hs.status = "Progressing"
if phase == "Progressing" then
  hs.message = "Rollout in progress: " .. rollout(status, obj.spec)
elseif phase == "" then
  hs.message = "Waiting for the modelship controller to write a status"
else
  hs.message = "Phase " .. phase
end
return hs
