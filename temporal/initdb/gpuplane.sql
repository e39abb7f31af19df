-- The GPUPlane catalogue beside Temporal's own databases; its tables come from GPUPlane's
-- migrations, applied by the API and the control worker when they start.
CREATE USER gpuplane WITH PASSWORD 'gpuplane';
CREATE DATABASE gpuplane OWNER gpuplane;
